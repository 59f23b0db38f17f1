public enum ProviderTestingModule {}
