"""How long a join or a Top-N keeps a row: ``'table.exec.state.ttl'`` and the hint
``/*+ STATE_TTL('alias' = '1h') */``, in milliseconds of processing time (0: for ever)."""
from __future__ import annotations

import re

from sqlglot import exp

from weir.engine.connectors.options import DURATION_EXAMPLES, DURATION_FORMS, duration_micros

_HINT = re.compile(r"STATE_TTL\s*\((.*?)\)", re.IGNORECASE | re.DOTALL)
_HINT_ITEM = re.compile(r"'([^']*)'\s*=\s*'([^']*)'")


def state_ttl_ms(qp) -> int:
    """The job's 'table.exec.state.ttl' in milliseconds (0: state is kept for ever)."""
    return _millis(qp.settings.get("table.exec.state.ttl") or "0", "'table.exec.state.ttl'", qp, None)


def state_ttl(settings: dict[str, str], select: exp.Select, left: str, right: str, qp) -> dict[str, int]:
    """Milliseconds each side's rows are kept (0: for ever): the job's 'table.exec.state.ttl',
    overridden per input by ``/*+ STATE_TTL('alias' = '1h') */``."""
    default = _millis(settings.get("table.exec.state.ttl") or "0", "'table.exec.state.ttl'", qp, select)
    ttl = {"left": default, "right": default}
    for comment in select.comments or []:
        match = _HINT.search(comment)
        if not match:
            continue
        for alias, value in _HINT_ITEM.findall(match.group(1)):
            sides = [s for s, a in (("left", left), ("right", right)) if a.lower() == alias.lower()]
            if not sides:
                raise qp.fail(f"STATE_TTL names `{alias}`, which is not an input of this join", select,
                              f"name the inputs by their aliases: `{left}`, `{right}`")
            ttl[sides[0]] = _millis(value, f"STATE_TTL for `{alias}`", qp, select)
    return ttl


def _millis(text: str, what: str, qp, node: exp.Expression) -> int:
    try:
        return duration_micros(text) // 1000
    except ValueError as reason:
        raise qp.fail(f"{what}: cannot read the duration '{text}': {reason}", node,
                      f"write {DURATION_FORMS}, e.g. {DURATION_EXAMPLES}") from None
