"""The forecast processor: series from the history store in, demand forecasts out."""
