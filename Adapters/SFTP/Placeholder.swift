enum SFTPAdapterModule {}
