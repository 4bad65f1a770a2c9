"""pddplan: capacity planning and cost modeling for cross-datacenter PDD LLM serving."""

__version__ = "0.1.0"
