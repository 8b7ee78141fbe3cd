"""Intent judges: a model or a function that says whether a tool call serves the user's
request (see docs/intent.md). :mod:`.base` is the contract; each ``kind`` of ``judges:``
entry has its module (``openai``, ``python``, ``langchain``); :mod:`.runner` caches,
times and audits their answers for the gate."""
