"""pddplan.support"""
