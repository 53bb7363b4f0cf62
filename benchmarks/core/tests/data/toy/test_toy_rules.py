def test_rule(rule, gate, metrics, verdict):
    verdict.check(gate, rule, metrics)
