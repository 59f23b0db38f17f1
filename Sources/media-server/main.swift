print("media-server: not built yet")
