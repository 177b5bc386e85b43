"""Settings: environment variables prefixed EXPORT_WORKER_, also read from a `.env` file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

LogLevel = Annotated[
    Literal["debug", "info", "warning", "error", "critical"],
    BeforeValidator(lambda v: v.lower() if isinstance(v, str) else v),
]


class Settings(BaseSettings):
    """Everything the worker can be told (docs/contract/configuration.md)."""

    model_config = SettingsConfigDict(
        env_prefix="EXPORT_WORKER_", env_file=".env", extra="ignore", frozen=True
    )

    backend: Literal["local", "azure"] = "local"
    home: Path = Path(".export-worker")

    history_limit_default: int = Field(10, ge=0)
    history_limit_max: int = Field(40, ge=0)
    max_attempts: int = Field(5, ge=1)
    csv_bom: bool = True
    max_export_bytes: int = Field(500 * 1024 * 1024, ge=1)
    concurrency: int = Field(4, ge=1)
    shutdown_grace_seconds: float = Field(30.0, ge=0)

    # Retry policy: one piece of data (worker/retry_policy.py reads it).
    backoff_base_seconds: float = Field(0.25, ge=0)
    backoff_max_seconds: float = Field(30.0, ge=0)
    # Tries of one port call that fails transiently, in place, before the delivery fails.
    call_attempts: int = Field(4, ge=1)
    # How long a received message (and its session) stays locked without renewal.
    lock_duration_seconds: float = Field(60.0, gt=0)
    # How long a session worker waits for the next message before releasing the session.
    session_idle_seconds: float = Field(0.2, gt=0)
    # How long one session's lock is renewed at most: longer than the longest export (the
    # Functions trigger's maxAutoLockRenewalDuration).
    max_lock_renewal_seconds: float = Field(3600.0, gt=0)

    # Operations (docs/operations.md): /healthz, /readyz and /metrics on this port (0: off),
    # on loopback unless told otherwise (the image listens on 0.0.0.0).
    http_port: int = Field(0, ge=0, le=65535)
    http_host: str = "127.0.0.1"
    # Log level when no --log-level is given (debug, info, warning, error, critical).
    log_level: LogLevel | None = None

    artifacts_container: str = "artifacts"
    exports_container: str = "exports"

    # Azure. Each service: DefaultAzureCredential by default, a connection string / key
    # when one is configured (development).
    servicebus_namespace: str | None = None  # e.g. myns.servicebus.windows.net
    servicebus_connection_string: SecretStr | None = None
    queue_name: str = "turn-completed"
    topic_name: str = "export-published"
    blob_account_url: str | None = None
    blob_connection_string: SecretStr | None = None
    cosmos_endpoint: str | None = None
    cosmos_key: SecretStr | None = None
    cosmos_database: str = "chat"
    conversations_container: str = "conversations"
    messages_container: str = "messages"
    turns_container: str = "turns"
    cosmos_create_resources: bool = False
    cosmos_verify_tls: bool = True
    sdk_timeout_seconds: float = Field(30.0, gt=0)
