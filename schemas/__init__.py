"""Every shape that crosses a boundary: events, stored documents, the turn record."""
