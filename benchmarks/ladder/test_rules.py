"""The preregistered gate of one probe: the ordered gate, then each of the four clauses on its own."""

from .protocol import CLAUSES, GATE


def test_gate_rule(rule, rule_metrics, verdict):
    verdict.check(GATE, rule, rule_metrics)


def test_clause(clause_rule, rule_metrics, verdict):
    clause, label = clause_rule.split(":", 1)
    verdict.check(CLAUSES[clause], label, rule_metrics)
