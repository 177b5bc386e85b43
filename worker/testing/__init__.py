"""Test and development machinery, kept out of the production modules.

Like `structlog.testing`, a named public package that the worker's own tests and its users'
tests can import. Nothing in it runs unless a caller passes it in explicitly.
"""
