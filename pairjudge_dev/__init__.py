"""Development tooling shared by the tests and the benchmarks; never shipped, never imported by the runtime.

Apache Kafka start-up (``kafka``), load generators (``pairgen``, ``poison``), an LLM-like judge server
(``slow_judge_server``), worker-process helpers (``workers``) and the benchmarks' common harness
(``bench``). The wheel ships only ``schemas``, ``agents`` and ``streams``; an import-linter contract keeps
those from importing this package. It is importable from the checkout root: pytest puts the root on
the path, and the benchmarks run as ``python -m bench.<name>``.
"""
