"""Settings: environment variables prefixed EXPORT_WORKER_, also read from a `.env` file
(`worker/environment.py` reads and checks them; docs/contract/configuration.md lists them)."""

from __future__ import annotations

from pathlib import Path

from worker.environment import (
    EnvSettings,
    Secret,
    Setting,
    boolean,
    integer,
    number,
    one_of,
    optional,
    path,
    secret,
    text,
)

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class Settings(EnvSettings):
    """Everything the worker can be told (docs/contract/configuration.md). `Settings()`
    reads the environment and `.env`; keyword arguments win over both."""

    backend = Setting("local", one_of("local", "azure"))
    home = Setting(Path(".export-worker"), path)

    history_limit_default = Setting(10, integer(ge=0))
    history_limit_max = Setting(40, integer(ge=0))
    max_attempts = Setting(5, integer(ge=1))
    csv_bom = Setting(True, boolean)
    max_export_bytes = Setting(500 * 1024 * 1024, integer(ge=1))
    # export.published's body and properties at most: a Service Bus standard message holds
    # 256 KB, headers included (premium: 100 MB).
    max_event_bytes = Setting(192 * 1024, integer(ge=1024))
    # The turn record (its JSON) at most: a Cosmos DB item holds 2 MB, the store's own
    # properties included. Thousands of groups or artifacts in one export approach it.
    max_record_bytes = Setting(1_900_000, integer(ge=16 * 1024))
    concurrency = Setting(4, integer(ge=1))
    shutdown_grace_seconds = Setting(30.0, number(ge=0))

    # Retry policy: one piece of data (worker/retry_policy.py reads it).
    backoff_base_seconds = Setting(0.25, number(ge=0))
    backoff_max_seconds = Setting(30.0, number(ge=0))
    # Tries of one port call that fails transiently, in place, before the delivery fails.
    call_attempts = Setting(4, integer(ge=1))
    # How long a received message (and its session) stays locked without renewal.
    lock_duration_seconds = Setting(60.0, number(gt=0))
    # How long a session worker waits for the next message before releasing the session.
    session_idle_seconds = Setting(0.2, number(gt=0))
    # How long one session's lock is renewed at most: longer than the longest export (the
    # Functions trigger's maxAutoLockRenewalDuration).
    max_lock_renewal_seconds = Setting(3600.0, number(gt=0))
    # `run --drain`: how long one kind of call to the queue may fail every time before the
    # drain gives up (exit 1); `run` without it tries for as long as it runs.
    drain_give_up_seconds = Setting(300.0, number(gt=0))

    # Operations (docs/operations.md): /healthz, /readyz and /metrics on this port (0: off),
    # on loopback unless told otherwise (the image listens on 0.0.0.0).
    http_port = Setting(0, integer(ge=0, le=65535))
    http_host = Setting("127.0.0.1", text)
    # Log level when no --log-level is given (debug, info, warning, error, critical).
    log_level = Setting(None, optional(one_of(*LOG_LEVELS)))

    artifacts_container = Setting("artifacts", text)
    exports_container = Setting("exports", text)

    # Azure. Each service: DefaultAzureCredential by default, a connection string / key
    # when one is configured (development).
    servicebus_namespace = Setting(None, optional(text))  # e.g. myns.servicebus.windows.net
    servicebus_connection_string: Setting[Secret | None] = Setting(
        None, optional(secret), hidden=True
    )
    queue_name = Setting("turn-completed", text)
    topic_name = Setting("export-published", text)
    blob_account_url = Setting(None, optional(text))
    blob_connection_string: Setting[Secret | None] = Setting(None, optional(secret), hidden=True)
    cosmos_endpoint = Setting(None, optional(text))
    cosmos_key: Setting[Secret | None] = Setting(None, optional(secret), hidden=True)
    cosmos_database = Setting("chat", text)
    conversations_container = Setting("conversations", text)
    messages_container = Setting("messages", text)
    turns_container = Setting("turns", text)
    cosmos_create_resources = Setting(False, boolean)
    cosmos_verify_tls = Setting(True, boolean)
    sdk_timeout_seconds = Setting(30.0, number(gt=0))
