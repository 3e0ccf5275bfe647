"""Reports: the sections of a report, its Markdown and HTML renderings, its plots, and where report files go."""
