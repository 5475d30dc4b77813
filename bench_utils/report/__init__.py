"""The report: records as tables and plots, the report notebook's sections, i18n, and HTML/Markdown rendering."""
