"""The preregistered rules of the rule preset's run, one test per rule, four ordered classifications.

token_control: the three-way verdict on R squared of TD -> H.
combined: the seed's combined verdict (eta squared and R squared).
eta2_target: eta squared above the target with the exact ANOVA p below alpha.
h2: eta squared of ACTIVE_MANIFOLD above that of BASELINE on the same prompts (A2 is the null).
"""

from .protocol import CLASSIFICATIONS


def test_token_control(token_control_rule, rule_metrics, verdict):
    verdict.check(CLASSIFICATIONS["token_control"], token_control_rule, rule_metrics)


def test_combined(combined_rule, rule_metrics, verdict):
    verdict.check(CLASSIFICATIONS["combined"], combined_rule, rule_metrics)


def test_eta2_target(eta2_target_rule, rule_metrics, verdict):
    verdict.check(CLASSIFICATIONS["eta2_target"], eta2_target_rule, rule_metrics)


def test_h2(h2_rule, rule_metrics, verdict):
    verdict.check(CLASSIFICATIONS["h2"], h2_rule, rule_metrics)
