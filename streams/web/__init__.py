"""The worker's pages: JSON views, `/metrics`, and the web view `/ui/` with its static files."""
