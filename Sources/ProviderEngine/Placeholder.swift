public enum ProviderEngineModule {}
