"""The preregistered CWR classification, one test per rule in the preregistered order."""

from .protocol import GATE


def test_rule(rule, rule_metrics, verdict):
    verdict.check(GATE, rule, rule_metrics)
