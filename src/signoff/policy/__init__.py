"""The policy layer: load ``signoff.yaml`` once, decide allow / deny / require_approval per call.

Conditions are YAML data compiled into closures over a closed operator table, so nothing in a
policy file is ever run as code, every mistake is reported at load with its file path and
line, and a decision takes a few microseconds.
"""

from signoff.policy.cases import CaseResult, run_cases
from signoff.policy.durations import parse_duration
from signoff.policy.engine import SHORT_HASH, Policy
from signoff.policy.explain import Explanation, RuleStep
from signoff.policy.people import People, Person
from signoff.policy.rates import RateCounter

__all__ = [
    "SHORT_HASH",
    "CaseResult",
    "Explanation",
    "People",
    "Person",
    "Policy",
    "RateCounter",
    "RuleStep",
    "parse_duration",
    "run_cases",
]
