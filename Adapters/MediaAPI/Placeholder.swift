enum MediaAPIAdapterModule {}
