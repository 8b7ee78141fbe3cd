"""signoff's benchmarks: ``python -m benchmarks`` (``make bench``) runs them and writes
``benchmarks/results.json``. One module per benchmark, each with ``run(quick) -> dict`` and
``rows(result) -> list[Row]``; :data:`benchmarks.__main__.BENCHMARKS` lists them."""
