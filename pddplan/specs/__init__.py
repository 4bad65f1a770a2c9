"""Input specs: strict, validated pydantic models for every file pddplan reads."""
