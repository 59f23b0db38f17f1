public enum ProviderStoreModule {}
