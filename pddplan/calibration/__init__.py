"""pddplan.calibration"""
