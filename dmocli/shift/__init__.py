"""The shift maths, pure numpy: what changes between the rows a model was trained on and new ones.

The positive rate of new rows and its interval (`prevalence`), a cut's figures at another rate (`at_rate`), the
metrics expected under label and covariate shift (`expected`), a threshold moved to a new rate (`adaptation`), a cut
carried between score scales (`carry`), and the drift of each feature: the profile's stored form (`drift_profile`)
and its statistics (`drift_stats`); counting a profile from columns is prep's (`prep/drift_counting.py`).
"""
