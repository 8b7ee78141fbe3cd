"""The channels benchmark's loopback receiver finds request ids as the gate makes them.

``make bench`` is not part of the suite; this keeps its id pattern in step with
:func:`signoff.model.calls.new_id` (a fixed-length pattern silently missed every
notification once ids grew)."""

from __future__ import annotations

import json

from benchmarks.channels import REQUEST_ID

from signoff.model.calls import new_id


def test_the_receiver_finds_whole_request_ids_in_buttons_links_and_text() -> None:
    ids = [new_id("req") for _ in range(500)]  # ids with "-" and "_" among them
    for rid in ids:
        body = json.dumps(
            {
                "text": f"Approve {rid}?",
                "blocks": [{"value": f"approve:{rid}", "url": f"http://x/r/{rid}?a=1"}],
                "callback_data": f"a:{rid}:c1",
            }
        )
        assert set(REQUEST_ID.findall(body)) == {rid}
