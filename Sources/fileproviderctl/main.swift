print("fileproviderctl")
