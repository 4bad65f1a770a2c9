"""pddplan.scenarios"""
