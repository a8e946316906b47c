int softrdma_placeholder_symbol = 0;
