"""Reports: rich tables and charts for people (stderr), JSON and files for machines."""
