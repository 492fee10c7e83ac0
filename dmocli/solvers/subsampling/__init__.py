"""Local uncertainty sampling (docs/lus.md): `lus` (the `lus` solver: an offset-corrected logistic fit on a
subsample) and `acceptance` (the acceptance probabilities of the subsampling methods, which `dmo subsample`
uses too).

Nothing is imported here: the registry (`dmocli/solvers/__init__.py`) imports a solver's module on first use.
"""
