"""What a person reads: explanations, charts, tables, the quote, translations and the URL codec.
Pure data and Altair specs; drawing them is the app's job."""
