/* config: not written yet */
