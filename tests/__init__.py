"""The test suites. A package so that the Service Bus test broker imports as
`tests.servicebus_broker` with the repository root on the path (never `tests/` itself,
whose folders would shadow `worker`, `handlers` and `azure` as namespace packages)."""
