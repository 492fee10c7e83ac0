"""The one-pass streaming solvers (docs/fofo.md): `solvers` (`fofo`, `ofo` and `lr`: online logistic regression
and the threshold each puts on it) and `thresholds` (the exact vectorized threshold recurrences of FOFO and OFO).

Nothing is imported here: the registry (`dmocli/solvers/__init__.py`) imports a solver's module on first use.
"""
