"""Fitting the step-time factors to measurements and checking them (the modules `estimate`,
`accuracy`, `calibrate`, `refit`, `bench_import`; `estimate` and `refit` are also their verbs).

Its verbs, imported on first use (`pddplan.support.lazy`):
    accuracy_report    pddplan.calibration.accuracy
    cross_validation   pddplan.calibration.accuracy
    read_measurements  pddplan.calibration.calibrate
    calibrate_profile  pddplan.calibration.calibrate
    fit_all            pddplan.calibration.calibrate
"""

from pddplan.support.lazy import exports as _exports

__getattr__, __dir__ = _exports(
    __name__,
    {
        "accuracy_report": "pddplan.calibration.accuracy",
        "cross_validation": "pddplan.calibration.accuracy",
        "read_measurements": "pddplan.calibration.calibrate",
        "calibrate_profile": "pddplan.calibration.calibrate",
        "fit_all": "pddplan.calibration.calibrate",
    },
)
