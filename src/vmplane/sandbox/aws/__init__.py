"""The AWS side of the sandbox: moto's server behind a strict layer that answers as AWS does."""
