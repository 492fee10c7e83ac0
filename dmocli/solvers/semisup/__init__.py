"""The semi-supervised solvers (docs/adsh.md): `fixmatch` and `adsh`, the two threshold rules on one training
loop, `consistency` (that loop: supervised and pseudo-label losses, EMA weights), `feature_views` (the weak and
strong views of a feature row) and `fallback` (keep the semi-supervised model only when the unlabeled rows
helped).

Nothing is imported here: the registry (`dmocli/solvers/__init__.py`) imports a solver's module on first use.
"""
