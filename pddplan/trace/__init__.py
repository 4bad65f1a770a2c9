"""Request traces: reading them as streams (`read`) and summarizing them (`stats`)."""
