"""The direct backend: one module per variant, their protocol (``base``) and their registry
(``registry``: the rule that picks a variant, the backend object the dispatcher calls)."""
