public enum LocalAdapterModule {}
