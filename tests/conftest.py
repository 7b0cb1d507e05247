"""Shared fixtures. The service fixtures start real servers and fail (never skip) when they cannot."""

pytest_plugins = [
    "tests.fixtures.browser",
    "tests.fixtures.concurrency",
    "tests.fixtures.kafka",
    "tests.fixtures.llama",
    "tests.fixtures.phoenix",
    "tests.fixtures.postgres",
]
