"""pddplan.analyses"""
