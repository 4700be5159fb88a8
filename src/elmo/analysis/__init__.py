"""The paper's analyses (section 5): what each biLM layer knows, as library functions that
`elmo analyze` composes."""
