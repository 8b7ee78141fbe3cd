"""The ``inquiries:`` section of ``signoff.yaml``: judges that stand in for humans.

```yaml
inquiries:
  fallback: {judge: fast, after: 2m}   # nobody answered within 2m: the judge answers
  suggest: {judge: fast}               # the judge pre-fills default_answer for humans
```

Top-level only: every inquiry of the gate gets the same fallback and suggestion (an inquiry
is not matched by tool rules). Mistakes are :class:`PolicyError` naming the key: a judge
that ``judges:`` does not define, an ``after`` that is not a duration, or one that is not
shorter than the inquiry deadline (``Gate.ask``'s default ``timeout``, 1h) — a fallback that
could never fire. An inquiry asked with a shorter deadline of its own gets no fallback (the
gate logs why).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from signoff.model import PolicyError
from signoff.policy.durations import format_duration
from signoff.policy.settings import Duration, SettingsSection, expand_env, validated

#: ``Gate.ask``'s default deadline for an inquiry (seconds).
DEFAULT_INQUIRY_TIMEOUT = 3600.0


class FallbackSettings(SettingsSection):
    """``inquiries.fallback``: the judge answers when no human did within ``after``."""

    judge: str = Field(min_length=1)
    after: Duration = Field(gt=0)


class SuggestSettings(SettingsSection):
    """``inquiries.suggest``: the judge pre-fills ``default_answer`` when an inquiry is made."""

    judge: str = Field(min_length=1)


class InquirySettings(SettingsSection):
    """``inquiries:`` keys (both optional)."""

    fallback: FallbackSettings | None = None
    suggest: SuggestSettings | None = None


class _Wrapper(SettingsSection):
    inquiries: InquirySettings = Field(default_factory=InquirySettings)


def from_sections(
    sections: Mapping[str, Any], *, filename: str = "signoff.yaml"
) -> InquirySettings:
    """The validated ``inquiries:`` section (judge names checked against ``judges:``)."""
    raw = sections.get("inquiries") or {}
    data = expand_env(dict(raw), "inquiries")
    settings = validated(_Wrapper, {"inquiries": data}, filename).inquiries
    judges = sections.get("judges") or {}
    for key, entry in (("fallback", settings.fallback), ("suggest", settings.suggest)):
        if entry is not None and entry.judge not in judges:
            known = ", ".join(sorted(str(n) for n in judges)) or "none defined"
            raise PolicyError(
                f"no judge named {entry.judge!r} in judges: ({known})",
                path=f"inquiries.{key}.judge",
                file=filename,
            )
    fallback = settings.fallback
    if fallback is not None and fallback.after >= DEFAULT_INQUIRY_TIMEOUT:
        raise PolicyError(
            f"after ({format_duration(fallback.after)}) must be shorter than the inquiry "
            f"deadline ({format_duration(DEFAULT_INQUIRY_TIMEOUT)}), or the judge never answers",
            path="inquiries.fallback.after",
            file=filename,
        )
    return settings


def check_sections(sections: Mapping[str, Any], *, filename: str) -> None:
    """The ``inquiries:`` checker of the section registry (:mod:`signoff.policy.sections`)."""
    from_sections(sections, filename=filename)
