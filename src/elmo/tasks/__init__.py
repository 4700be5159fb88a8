"""Task models that use ELMo (tagging, classification, sentence pairs), their data and recipe."""
