"""The one retrieve pipeline: planning, keyword query, fusion, ranking, context packing, bounds."""
