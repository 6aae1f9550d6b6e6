"""Alembic environment: vmplane passes an open connection in `config.attributes`."""

from alembic import context

from vmplane.store.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through vmplane.store.db.migrate()")
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
