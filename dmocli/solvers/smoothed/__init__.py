"""The sigmoid-smoothed baselines ERO is compared with (docs/ero.md): `sigmoid_f1` and `lagrangian`, two losses
on soft counts, and `training` (the Adam loop both share).

Nothing is imported here: the registry (`dmocli/solvers/__init__.py`) imports a solver's module on first use.
"""
