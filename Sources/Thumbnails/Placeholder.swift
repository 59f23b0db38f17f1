enum ThumbnailsModule {}
